"""Thin Prefect tasks around the agentsession_core engine phases."""
