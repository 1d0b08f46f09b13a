"""The pbcast.* protocols (probabilistic-broadcast-era reliable delivery, membership, stability)."""
