package telemetry

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
