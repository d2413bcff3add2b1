"""The test harness: server processes and their clients (JSON-RPC over stdio and
WebSocket, an ACP editor and a scripted ACP agent), a throwaway PostgreSQL cluster,
import fixtures, one item factory and one `eventually()`. Nothing here asserts."""
