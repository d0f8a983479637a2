"""Pure bytes to meaning and back: request bodies, HTTP/1.1 framing, SSE, chunks. Shared by client and mock."""
