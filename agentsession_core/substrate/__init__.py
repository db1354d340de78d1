"""The substrate under test: its interface (client.py), its errors (errors.py) and the
embedded local implementation (local/)."""
