package workload

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestPairs(t *testing.T) {
	p := PairsOf(map[string]string{"team": "a", "app": "order", "tier": "", "version": "v2"})
	if p.Len() != 4 || p.String() != "app=order,team=a,tier=,version=v2" {
		t.Fatalf("PairsOf = %q (%d pairs)", p.String(), p.Len())
	}
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"app", "order", true}, {"team", "a", true}, {"tier", "", true}, {"version", "v2", true},
		{"a", "", false}, {"tea", "", false}, {"zzz", "", false}, {"", "", false},
	}
	for _, tt := range tests {
		if v, ok := p.Lookup(tt.key); v != tt.want || ok != tt.ok || p.Get(tt.key) != tt.want || p.Has(tt.key) != tt.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.key, v, ok, tt.want, tt.ok)
		}
	}
	if got := p.With("app", "cart").With("b", "1").String(); got != "app=cart,b=1,team=a,tier=,version=v2" {
		t.Fatalf("With = %q", got)
	}
	if got := p.Without("team").Without("nope").String(); got != "app=order,tier=,version=v2" {
		t.Fatalf("Without = %q", got)
	}
	if p.String() != "app=order,team=a,tier=,version=v2" {
		t.Fatalf("With or Without changed p: %q", p.String())
	}
	if !p.Equal(PairsFrom("version", "v2", "tier", "", "app", "order", "team", "a")) || p.Equal(p.Without("tier")) {
		t.Fatal("Equal")
	}
	if !reflect.DeepEqual(p.Map(), map[string]string{"team": "a", "app": "order", "tier": "", "version": "v2"}) || (Pairs{}).Map() != nil || PairsOf(map[string]string{}).Len() != 0 {
		t.Fatalf("Map = %v", p.Map())
	}
	if w := PairsFrom("a", "1").Without("a"); w.Len() != 0 || w.String() != "" {
		t.Fatalf("the last pair removed: %q", w.String())
	}
	// A selector matches Pairs as it matched the map.
	sel, err := labels.Parse("app=order,tier,version!=v1")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(p) || sel.Matches(p.Without("tier")) || !sel.Matches(labels.Set(p.Map())) {
		t.Fatal("selector over Pairs")
	}
	// JSON as the map was written.
	b, err := json.Marshal(struct{ L Pairs }{p})
	if err != nil || string(b) != `{"L":{"app":"order","team":"a","tier":"","version":"v2"}}` {
		t.Fatalf("json %s, %v", b, err)
	}
	var back struct{ L Pairs }
	if err := json.Unmarshal(b, &back); err != nil || !back.L.Equal(p) {
		t.Fatalf("json back %v, %v", back.L, err)
	}
	if err := json.Unmarshal([]byte(`{"L":[1]}`), &back); err == nil || err.Error() != "reading pairs: json: cannot unmarshal array into Go value of type map[string]string" {
		t.Fatalf("bad json: %v", err)
	}
}
