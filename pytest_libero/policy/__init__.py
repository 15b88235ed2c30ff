"""Talking to policy servers: the openpi wire codec and a synchronous websocket client."""
