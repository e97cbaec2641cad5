"""tierlab.traces — the one result schema (schema.yaml) and its readers.

schema: the tables as Arrow schemas; write_table and read_table, the only
writer and reader of a table (Parquet or CSV), checking columns, types and
version. runs: a measured query run as run, query and term tables. read:
find_tables and read_tables, every table under a path. Imports only
tierlab.core (docs/architecture.md)."""
