"""Component markers used throughout the lease runtime tests."""


class Full:
    """Full-attention KV."""


class Mamba:
    """Recurrent state."""
