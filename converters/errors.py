"""The converters' one error type: what the user can fix, printed as a line and its fix (exit 2)."""
class ConverterError(Exception):
    """A failure the user can fix: printed as one line plus the fix, exit code 2."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"
