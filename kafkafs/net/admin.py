"""stub"""
HANDLERS = {}
