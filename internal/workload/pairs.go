package workload

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Pairs is a workload's labels or annotations in a compact, immutable form: the keys sorted, each
// followed by its value, in one slice. A Go map of up to eight entries costs ~330 bytes before its
// strings, whatever it holds; four labels as Pairs cost 24 + 8 x 16 bytes. At 20,000 workloads
// the two maps of each were ~13 MB of the manager's live heap (docs/benchmarks/manager-scale.md).
// Reads are a binary search over a handful of keys. It implements labels.Labels, so a label
// selector matches it directly. The zero Pairs is empty. Share it freely: nothing changes it.
type Pairs struct {
	kv []string
}

// PairsOf copies m (nil or empty: the zero Pairs).
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return Pairs{}
	}
	return PairsOfFunc(len(m), maps.All(m), nil)
}

// PairsOfFunc is PairsOf of the n (a capacity hint) pairs of seq for which keep (nil: all) is
// true, each key and value passed through intern when it is not nil (the cache shares repeated
// strings): the cache transform's one pass over a decoded object's map.
func PairsOfFunc(n int, seq iter.Seq2[string, string], keep func(k, v string) (string, string, bool)) Pairs {
	kv := make([]string, 0, 2*n)
	for k, v := range seq {
		if keep != nil {
			var ok bool
			if k, v, ok = keep(k, v); !ok {
				continue
			}
		}
		kv = append(kv, k, v)
	}
	if len(kv) == 0 {
		return Pairs{}
	}
	p := Pairs{kv: slices.Clip(kv)}
	p.sort()
	return p
}

// sort orders the pairs by key (insertion sort: a handful of pairs).
func (p Pairs) sort() {
	for i := 2; i < len(p.kv); i += 2 {
		for j := i; j > 0 && p.kv[j] < p.kv[j-2]; j -= 2 {
			p.kv[j], p.kv[j-2] = p.kv[j-2], p.kv[j]
			p.kv[j+1], p.kv[j-1] = p.kv[j-1], p.kv[j+1]
		}
	}
}

// PairsFrom is the Pairs of alternating keys and values (for tests and literals); a later key
// replaces an earlier one.
func PairsFrom(kv ...string) Pairs {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return PairsOf(m)
}

func (p Pairs) find(k string) (int, bool) {
	lo, hi := 0, len(p.kv)/2
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.kv[2*m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(p.kv)/2 && p.kv[2*lo] == k
}

// Lookup returns k's value and whether k is there.
func (p Pairs) Lookup(k string) (string, bool) {
	if i, ok := p.find(k); ok {
		return p.kv[2*i+1], true
	}
	return "", false
}

// Get returns k's value ("" when absent), as a map read does.
func (p Pairs) Get(k string) string {
	v, _ := p.Lookup(k)
	return v
}

// Has reports whether k is there.
func (p Pairs) Has(k string) bool {
	_, ok := p.find(k)
	return ok
}

// Len is the number of pairs.
func (p Pairs) Len() int { return len(p.kv) / 2 }

// All yields the pairs in key order.
func (p Pairs) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i+1 < len(p.kv); i += 2 {
			if !yield(p.kv[i], p.kv[i+1]) {
				return
			}
		}
	}
}

// Map is p as a new map (nil when empty), for an API that takes one.
func (p Pairs) Map() map[string]string {
	if len(p.kv) == 0 {
		return nil
	}
	m := make(map[string]string, len(p.kv)/2)
	for k, v := range p.All() {
		m[k] = v
	}
	return m
}

// Equal reports whether p and q hold the same pairs.
func (p Pairs) Equal(q Pairs) bool { return slices.Equal(p.kv, q.kv) }

// Without is p without key k (p itself when k is not there).
func (p Pairs) Without(k string) Pairs {
	i, ok := p.find(k)
	if !ok {
		return p
	}
	if len(p.kv) == 2 {
		return Pairs{}
	}
	return Pairs{kv: slices.Concat(p.kv[:2*i], p.kv[2*i+2:])}
}

// String is "k1=v1,k2=v2" in key order, as labels.Set's String.
func (p Pairs) String() string {
	var b strings.Builder
	for k, v := range p.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String()
}

// With is p with k set to v (a new Pairs; p is not changed).
func (p Pairs) With(k, v string) Pairs {
	i, ok := p.find(k)
	if ok {
		kv := slices.Clone(p.kv)
		kv[2*i+1] = v
		return Pairs{kv: kv}
	}
	return Pairs{kv: slices.Concat(p.kv[:2*i], []string{k, v}, p.kv[2*i:])}
}

// MarshalJSON writes p as a JSON object, as the map it replaces was written (keys sorted).
func (p Pairs) MarshalJSON() ([]byte, error) { return json.Marshal(p.Map()) }

// UnmarshalJSON reads a JSON object (null: empty).
func (p *Pairs) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("reading pairs: %w", err)
	}
	*p = PairsOf(m)
	return nil
}
