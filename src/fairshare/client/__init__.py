"""What a job calls from inside itself (docs/progress.md): `from fairshare.client import report`."""
