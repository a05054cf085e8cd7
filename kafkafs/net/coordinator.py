"""stub"""
HANDLERS = {}


def make_state(broker):
    return None
