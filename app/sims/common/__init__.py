"""What every domain shares: config loading, the Simulation surface, the session loop, outputs."""
