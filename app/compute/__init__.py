"""Device discovery, CUDA contexts, kernel loading and the Philox RNG twin. No Qt here."""
