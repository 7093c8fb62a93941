"""Alembic migrations of the service's database (``sporal migrate``)."""
