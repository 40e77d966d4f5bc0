package cli

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var updateServices = flag.Bool("update-services", false, "rewrite testdata/services/*.golden from the current output")

// TestAnalyzeResolvesServices runs analyze on manifests in the shapes Services take in real
// apps (testdata/services: a Service fronting versioned Deployments, a Service whose selector
// matches a differently named Deployment, aliases, a Service without a selector, ExternalName)
// and compares stdout with the goldens; stderr holds at most the read summary (-o json puts it
// there) and the exit status is exact.
func TestAnalyzeResolvesServices(t *testing.T) {
	tests := []struct {
		file, output string
		code         int
	}{
		{"bookinfo", "table", ExitOverCap},
		{"bookinfo", "json", ExitOverCap},
		{"emojivoto", "table", ExitOverCap},
		{"emojivoto", "tree", ExitOverCap},
		{"leaves-and-aliases", "table", 0},
	}
	for _, tt := range tests {
		t.Run(tt.file+"."+tt.output, func(t *testing.T) {
			code, out, stderr := run(t, "", "analyze", "-f", filepath.Join("testdata", "services", tt.file+".yaml"), "-o", tt.output)
			if code != tt.code || !onlyReadSummary(stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and no stderr but the read summary", code, stderr, tt.code)
			}
			golden := filepath.Join("testdata", "services", tt.file+"."+tt.output+".golden")
			if *updateServices {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-services to create it)", err)
			}
			if out != string(want) {
				t.Errorf("stdout differs from %s:\n--- got\n%s\n--- want\n%s", golden, out, want)
			}
		})
	}
}

// Without their Service objects the same apps are what analyze reported before it read
// Services: the callers' names are leaves, 3 <= cap 4, exit 0.
func TestAnalyzeWithoutTheServiceObjects(t *testing.T) {
	for _, tt := range []struct {
		file string
		path []string
	}{
		{"bookinfo", []string{"productpage-v1", "details"}},
		{"emojivoto", []string{"vote-bot", "web-svc"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			all, err := os.ReadFile(filepath.Join("testdata", "services", tt.file+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, doc := range strings.Split(string(all), "---\n") {
				if !strings.Contains(doc, "\nkind: Service\n") {
					kept = append(kept, doc)
				}
			}
			code, out, stderr := run(t, strings.Join(kept, "---\n"), "analyze", "-f", "-", "-o", "json")
			var rep struct {
				Summary struct {
					Services int `json:"services"`
				} `json:"summary"`
				Policies []struct {
					Amplification int64    `json:"amplification"`
					WorstPath     []string `json:"worstPath"`
				} `json:"policies"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Policies) != 1 || code != 0 || !onlyReadSummary(stderr) || rep.Summary.Services != 0 {
				t.Fatalf("exit %d, stderr %q, %v: %s", code, stderr, err, out)
			}
			if p := rep.Policies[0]; p.Amplification != 3 || !reflect.DeepEqual(p.WorstPath, tt.path) {
				t.Fatalf("%+v, want 3 along %v", p, tt.path)
			}
		})
	}
}

// onlyReadSummary reports whether stderr is empty or only analyze's read summary (one line).
func onlyReadSummary(stderr string) bool {
	return stderr == "" || strings.HasPrefix(stderr, "read: ") && strings.HasSuffix(stderr, "\n\n") && strings.Count(stderr, "\n") == 2
}
