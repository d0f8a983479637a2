"""The kernel's side of a socket, shared by client and mock: receive/transmit timestamps, fd and port limits."""
