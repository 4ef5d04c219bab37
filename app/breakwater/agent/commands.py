"""Sub-commands of this layer (placeholder until the layer lands)."""


def register(sub) -> None:
    return None
