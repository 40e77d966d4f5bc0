package jsonfield_test

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/jsonfield"
)

// route is a local struct as the mesh readers decode into: only the fields read.
type route struct {
	Spec struct {
		HTTP []struct {
			Retries *struct {
				Attempts int64 `json:"attempts"`
			} `json:"retries"`
		} `json:"http"`
		ByName map[string]struct {
			Attempts int64 `json:"attempts"`
		} `json:"byName"`
	} `json:"spec"`
}

func TestDecode(t *testing.T) {
	deploy := func(s string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n" + s
	}
	cases := []struct {
		name, doc, want string
	}{
		{"ok", deploy("    metadata: {annotations: {retrycap.dev/upstreams: \"order=3\"}}"), ""},
		{"annotation a number", deploy("    metadata: {annotations: {a: b, retrycap.dev/upstreams: 3}}"),
			`spec.template.metadata.annotations["retrycap.dev/upstreams"]: 3 is a number, want a string (quote it)`},
		{"annotation a boolean", deploy("    metadata: {annotations: {retrycap.dev/inject: true}}"),
			`spec.template.metadata.annotations["retrycap.dev/inject"]: true is a boolean, want a string (quote it)`},
		{"annotation a map", deploy("    metadata: {annotations: {retrycap.dev/upstreams: {order: 3}}}"),
			`spec.template.metadata.annotations["retrycap.dev/upstreams"]: {"order":3} is an object, want a string`},
		{"annotations a list", deploy("    metadata: {annotations: [retrycap.dev/upstreams=order]}"),
			`spec.template.metadata.annotations: ["retrycap.dev/upstreams=order"] is a list, want an object`},
		{"port a string", deploy("    spec: {containers: [{name: a, image: x}, {name: b, image: z, ports: [{containerPort: \"80\"}]}]}"),
			`spec.template.spec.containers[1].ports[0].containerPort: "80" is a string, want an integer`},
		{"replicas too large", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1e12}",
			`spec.replicas: 1000000000000 is a number, want an integer that fits in int32`},
		{"replicas a fraction", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2.5}",
			`spec.replicas: 2.5 is a number, want an integer`},
		{"annotations misplaced", deploy("    annotations: {retrycap.dev/upstreams: \"order=3\"}"),
			`unknown field "spec.template.annotations"`},
		{"upper-case field", deploy("    metadata: {Annotations: {retrycap.dev/upstreams: \"order=3\"}}"),
			`unknown field "spec.template.metadata.Annotations"`},
		{"duplicate field", "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}",
			`duplicate field "metadata.name"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := []byte(tc.doc) // JSON as given: YAMLToJSON would keep only the later of two keys
			if tc.doc[0] != '{' {
				var err error
				if js, err = yaml.YAMLToJSON(js); err != nil {
					t.Fatal(err)
				}
			}
			err := jsonfield.Decode(js, &appsv1.Deployment{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Decode error\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestUnmarshal(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"spec":{"http":[{},{"retries":{"attempts":"three"}}]}}`, `spec.http[1].retries.attempts: "three" is a string, want an integer`},
		{`{"spec":{"http":[{"retries":"3"}]}}`, `spec.http[0].retries: "3" is a string, want an object`},
		{`{"spec":{"http":[{"retries":{"attempts":9223372036854775808}}]}}`, `spec.http[0].retries.attempts: 9223372036854775808 is a number, want an integer that fits in int64`},
		{`{"spec":{"http":{"retries":{}}}}`, `spec.http: {"retries":{}} is an object, want a list`},
		{`{"spec":{"http":[{"retries":{"attempts":3},"other":[1,2]}]}}`, ``},
		// A map's key is not in Go's field path.
		{`{"spec":{"http":[{"retries":{"attempts":3}}],"byName":{"r1":{"attempts":2},"r2":{"attempts":"3"}}}}`, `spec.byName.r2.attempts: "3" is a string, want an integer`},
		{`{"spec":{"http":[{"retries":{"attempts":"0123456789012345678901234567890123456789012345678901234567890123456789"}}]}}`,
			`spec.http[0].retries.attempts: "01234567890123456789012345678901234567890123456789012345678... is a string, want an integer`},
	}
	for _, tc := range cases {
		var r route
		err := jsonfield.Unmarshal([]byte(tc.doc), &r)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Unmarshal(%s)\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
}

// timed has a type with its own UnmarshalJSON (the offset Go reports is inside its bytes) and an
// embedded struct (Go's field path names it, the JSON does not).
type timed struct {
	Spec struct {
		Inner `json:",inline"`
		Rules []struct {
			Timeout *metav1.Duration `json:"timeout"`
		} `json:"rules"`
	} `json:"spec"`
}

type Inner struct {
	Cap int32 `json:"cap"`
}

func TestDescribeCustomAndEmbedded(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"spec":{"rules":[{"timeout":"1s"},{"timeout":2}]}}`, `spec.rules[1].timeout: 2 is a number, want a string (quote it)`},
		{`{"spec":{"cap":"4"}}`, `spec.cap: "4" is a string, want an integer`},
	}
	for _, tc := range cases {
		var v timed
		err := jsonfield.Decode([]byte(tc.doc), &v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Decode(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"three": `"three"`, "a<b>&c": `"a<b>&c"`, "q\"": `"q\""`, "": `""`} {
		if got := jsonfield.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// The strict decoder's refused fields keep its text and name each path, for analyze -o json.
func TestStrictErrorFields(t *testing.T) {
	var d appsv1.Deployment
	err := jsonfield.Decode([]byte(`{"metadata":{"name":"a","name":"b"},"spec":{"template":{"annotations":{}}}}`), &d)
	se, ok := errors.AsType[*jsonfield.StrictError](err)
	if !ok {
		t.Fatalf("error %T %v, want a *StrictError", err, err)
	}
	if want := `duplicate field "metadata.name"; unknown field "spec.template.annotations"`; err.Error() != want {
		t.Errorf("text %q\nwant %q", err.Error(), want)
	}
	var got []string
	for _, f := range se.Fields {
		got = append(got, f.Path+": "+f.Msg)
	}
	if want := []string{"metadata.name: duplicate field", "spec.template.annotations: unknown field"}; !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
}
