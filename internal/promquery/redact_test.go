package promquery

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRedactURL: the password and every query value are "xxxxx" in what a message says of a
// URL, parsable or not (before: a ?token= on --prometheus-url was printed whole).
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://prom:9090", "http://prom:9090"},
		{"http://admin:s3cret@prom:9090/", "http://admin:xxxxx@prom:9090/"},
		{"https://prom.example/select/0/prometheus?token=s3cret", "https://prom.example/select/0/prometheus?token=xxxxx"},
		{"http://prom:9090/?api_key=s3cret&tenant=a&debug", "http://prom:9090/?api_key=xxxxx&tenant=xxxxx&debug"},
		{"http://admin:s3cret@prom:9090/p?access_token=s3cret#frag", "http://admin:xxxxx@prom:9090/p?access_token=xxxxx#frag"},
		// Not a URL (url.Parse fails on the escape): the same, by hand.
		{"http://admin:s3cret@prom:9090/%zz?token=s3cret#f", "http://admin:xxxxx@prom:9090/%zz?token=xxxxx#f"},
		{"prom:9090/%zz?token=s3cret", "prom:9090/%zz?token=xxxxx"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// TestQueryTokenNotInErrors: a token in --prometheus-url's query string is in no message of the
// client: its URL and an error naming the URL that served a login page.
func TestQueryTokenNotInErrors(t *testing.T) {
	_, url := hostile(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>sign in</html>")
	}, Options{})
	c, err := New(Options{URL: url + "/?token=s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if want := url + "/?token=xxxxx"; c.URL() != want {
		t.Errorf("URL() = %s, want %s", c.URL(), want)
	}
	_, err = c.query(context.Background(), testQ, time.Now())
	want := `query sum(up): HTTP 200 from ` + url + `/api/v1/query?token=xxxxx with Content-Type "text/html", not Prometheus' JSON (a login page or a proxy in front of Prometheus?): the answer begins "<html>sign in</html>"`
	if err == nil || err.Error() != want || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
