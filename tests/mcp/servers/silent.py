"""A server that starts but never answers (not even the handshake)."""

import time

time.sleep(120)
