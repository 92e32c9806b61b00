"""The rules of a submission: limits, languages, test-case forms and program extraction."""
