"""Prefect flows that run a campaign (see flows/campaign.py)."""
