"""icplay's environments served to other trainers and harnesses (OpenEnv's server)."""
