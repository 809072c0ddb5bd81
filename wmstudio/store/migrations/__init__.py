"""Alembic migrations of the studio database, shipped in the package so an installed studio upgrades its file.

`wmstudio.store.database.upgrade_database` runs them in code; no alembic.ini is needed."""
