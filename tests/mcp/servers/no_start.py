"""A server that exits before answering anything."""

import sys

sys.exit("no configuration found")
