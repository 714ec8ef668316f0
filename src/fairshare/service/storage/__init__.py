"""Storage: the database (SQLite or PostgreSQL), its schema and migrations, the journal, the hash-chained
audit, policy versions and exceptions (the portfolio), tokens and roles, the writer lock."""
