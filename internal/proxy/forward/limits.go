package forward

import "time"

// Limits both engines apply alike.
const (
	// BufferedBodyMax is the largest known-length response body read whole
	// rather than streamed: 64 KiB per request in flight.
	BufferedBodyMax = 64 << 10
	// MaxInterim bounds the 1xx answers skipped before the final one.
	MaxInterim = 100
	// BodyIdleTimeout is the longest a streamed response body may go
	// without a byte arriving from the upstream before the proxy cuts it.
	BodyIdleTimeout = 60 * time.Second
	// MaxRequestBody is the largest request body the proxy reads (it
	// buffers bodies to replay them).
	MaxRequestBody = 16 << 20
	// ClientIdleTimeout closes a client connection idle (between requests)
	// for this long.
	ClientIdleTimeout = 90 * time.Second
)
