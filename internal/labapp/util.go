package labapp

import (
	"strings"
	"sync"
)

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
		if j := strings.IndexByte(parts[i], ';'); j >= 0 {
			parts[i] = parts[i][:j]
		}
	}
	return parts
}

func cutEq(m string) (string, string, bool) {
	k, v, ok := strings.Cut(m, "=")
	return strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v), ok
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
