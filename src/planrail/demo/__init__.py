"""The built-in demonstration: onboarding a customer into a local SQLite "CRM"."""
