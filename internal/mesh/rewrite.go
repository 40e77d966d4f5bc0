package mesh

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// Rewrite lowers one layer's field so that the layer gives a target number of tries.
type Rewrite struct {
	// Object and FieldPath name what changes (FieldPath may be deeper than the layer's when the
	// block was missing: "spec.http[1].retries" becomes "spec.http[1].retries.attempts").
	Object, FieldPath string
	// From and To are the field's values as the suggestion shows them ("3", "unset (2)",
	// `"2"`, "removed").
	From, To string
	// Suggestion is "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 -> 0".
	Suggestion string

	path   []any // keys (string) and indexes (int) of FieldPath
	check  bool  // the field must hold old
	absent bool  // the field must be unset
	// blockExists: the field's parent exists (retry: {} without attempts), not only the field.
	blockExists bool
	old         any
	value       any  // new value: int64 or string
	remove      bool // Linkerd to 1 try: remove the retry.linkerd.io annotations (linkerdRetryKeys); a rule's retry block
	// inner is, when a block is removed (spec.rules[i].retry), the key in it that check and
	// absent are about ("attempts").
	inner string
	// only: a VirtualService route's retries lowered to attempts 0 keep attempts alone. Istio's
	// validation (ValidateHTTPRetry) refuses perTryTimeout, retryOn or retryRemoteLocalities
	// beside attempts 0, and its proxy config drops the whole block then (ConvertPolicy gives
	// no retry policy), so the other fields, backoff among them, go with no change in effect.
	only bool
}

// IstioZeroAttemptsAlone is what a VirtualService route's retries lowered to attempts 0 say of
// the block's other fields (Rewrite.only).
const IstioZeroAttemptsAlone = "the block's other fields removed: Istio refuses perTryTimeout, retryOn, retryRemoteLocalities beside attempts 0; a perTryTimeout becomes the route's timeout where that is unset or longer, to bound the one try as before"

// CapTail ends PlanRewrite's errors for a layer whose object has no field that gives the tries
// asked (an Ingress, a GRPCRoute, a Gateway API rule below 2 tries): after what the object
// would have to change, the policy's cap. "Or lower the callers' attempts" was said where they
// were at 1 already (advice19); PlanRewrite sees no graph, so a caller that has one
// (internal/webhook) puts workload.Result.Levers in its place.
const CapTail = ", or raise the policy's spec.maxAmplification"

// PlanRewrite says how to change layer l's object so that the layer gives tries (at least 1,
// fewer than l.Tries). A layer no object declares (a mesh default, a ServiceProfile, MeshConfig)
// cannot be rewritten: the error says what to do instead.
func PlanRewrite(l Layer, tries int64) (*Rewrite, error) {
	if tries < 1 || tries >= l.Tries {
		return nil, fmt.Errorf("%s: cannot rewrite %d tries to %d: the target must be at least 1 and below the layer's tries", l.Note, l.Tries, tries)
	}
	return plan(l, tries)
}

// LowestRewrite is PlanRewrite of l to tries; when l's field cannot give that few but can give
// fewer than now (a Gateway API rule: 2 tries, MinTries), the rewrite to the fewest it gives as
// well as the error, so that a fix lowers it as far as it goes and says why the demand is not met.
// give is the tries l gives with the rewrite returned (l.Tries when there is none). The status's
// fix text and analyze -o patch both lower a layer through it, so they name the same value.
func LowestRewrite(l Layer, tries int64) (rw *Rewrite, give int64, err error) {
	rw, err = PlanRewrite(l, tries)
	if err == nil {
		return rw, tries, nil
	}
	if floor := MinTries(l); tries < floor && floor < l.Tries {
		if fl, ferr := PlanRewrite(l, floor); ferr == nil {
			return fl, floor, err
		}
	}
	return nil, l.Tries, err
}

// Field is a plan of l whatever l's tries (to 1 try; a Gateway API rule's to 2), for the field's
// path and value as messages show them (Object, FieldPath, From): a rule's retry.attempts, not
// the block its removal to 1 try names.
func Field(l Layer) (*Rewrite, error) {
	if ruleRetry(l) {
		return plan(l, 2)
	}
	return plan(l, 1)
}

// defaultError is PlanRewrite's error for a layer no object declares: the mesh's default, whose
// lever is the object and field that set it (or turn it off), in its own unit. It said "lower
// the caller's attempts", which leaves the default's tries as they are (adv20).
func defaultError(l Layer, tries int64) error {
	head := fmt.Sprintf("%s: no object declares these %d tries", l.Note, l.Tries)
	switch l.Kind {
	case Istio:
		msg := fmt.Sprintf("%s, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: %d), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: %d, ConfigMap %s/%s data.%s)",
			head, tries-1, tries-1, IstioConfigNamespace, IstioConfigName, IstioConfigKey)
		if strings.Contains(l.Note, "--istio-default-retries=") {
			msg += ", and retrycap's --istio-default-retries with it"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("%s, the mesh's default: declare the retries of the callee's route (%d tries)", head, tries)
}

func plan(l Layer, tries int64) (*Rewrite, error) {
	kind, name, _ := strings.Cut(l.Object, " ")
	if err := kindRewritable(l, tries); err != nil {
		return nil, err
	}
	switch {
	case kind == "Ingress" && l.Kind == Istio:
		return nil, fmt.Errorf("%s: an Ingress has no retry field (Istio translates it with none, pilot/pkg/config/kube/ingress): route its paths through a VirtualService bound to the ingress gateway with retries.attempts: %d instead"+CapTail, l.Note, tries-1)
	case l.Object == "" || l.FieldPath == "":
		return nil, defaultError(l, tries)
	case kind == "ConfigMap" && strings.Contains(l.Note, "defaultInboundHttpRetryPolicy"):
		return nil, fmt.Errorf("%s: the policy is YAML inside %s %s: change defaultInboundHttpRetryPolicy.attempts to %d there, or its retryOn to %s alone (a reset before the app received the request adds no try)", l.Note, l.Object, l.FieldPath, tries-1, IstioInboundRetryOn)
	case kind == "ConfigMap":
		return nil, fmt.Errorf("%s: the default is YAML inside %s %s: change defaultHttpRetryPolicy.attempts to %d there, or declare the retries on the callee", l.Note, l.Object, l.FieldPath, tries-1)
	}
	if ruleRetry(l) && kind == "GRPCRoute" {
		// The Gateway API's GRPCRoute has no retry (v1.6): the API server would drop the field
		// and keep the mesh's default.
		return nil, fmt.Errorf("%s: %s has no retry field (the Gateway API's GRPCRoute: the API server drops one), so its rules get the mesh's default: declare the retries on a VirtualService route for the Service with retries.attempts: %d"+CapTail,
			l.Note, l.Object, tries-1)
	}
	if ruleRetry(l) && tries < MinTries(l) {
		return nil, fmt.Errorf("%s: %s %s cannot give %d try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets %d tries; set %s %s.attempts: 1 (2 tries, its fewest)"+CapTail,
			l.Note, l.Object, strings.TrimSuffix(l.FieldPath, ".attempts"), tries, l.Unset, l.Object, strings.TrimSuffix(l.FieldPath, ".attempts"))
	}
	r := &Rewrite{Object: l.Object, FieldPath: l.FieldPath}
	retries := tries - 1
	if ruleRetry(l) && tries == 1 {
		// The CRD refuses attempts: 0; without the block the rule gets l.Unset = 1 try.
		r.FieldPath = strings.TrimSuffix(l.FieldPath, ".attempts")
		r.remove, r.inner = true, "attempts"
		r.check, r.absent = !l.Default, l.Default
		switch {
		case r.check:
			r.old = l.Tries - 1
			r.From = fmt.Sprintf("{attempts: %d}", l.Tries-1)
		case strings.HasSuffix(l.FieldPath, ".attempts"):
			r.From = fmt.Sprintf("{} (%d retries)", l.Tries-1)
		default:
			return nil, fmt.Errorf("%s: %s %s is unset already", l.Note, l.Object, l.FieldPath)
		}
		r.To = "removed (1 try)"
	} else if l.Kind == IngressNginx {
		// ingress-nginx's annotation counts tries, the first included, as a string.
		r.FieldPath = annotationPath(IngressNginxNextUpstreamTries)
		r.check = !l.Default
		if r.check {
			r.old = strconv.FormatInt(l.Tries, 10)
			r.From = strconv.Quote(r.old.(string))
		} else if f := strings.Fields(l.Note); len(f) > 1 && f[0] == "ConfigMap" {
			// The controller's ConfigMap sets the default (ingressnginx_config.go nginxLayer):
			// the annotation overrides it for this Ingress alone.
			r.From = fmt.Sprintf("unset (%d, the default ConfigMap %s sets)", l.Tries, f[1])
		} else {
			r.From = fmt.Sprintf("unset (%d)", l.Tries)
		}
		r.value = strconv.FormatInt(tries, 10)
		r.To = strconv.Quote(r.value.(string))
	} else if l.Kind == Linkerd {
		// Only an explicit limit is checked: "0" and a retry annotation without a limit are
		// both 1 retry, and setting the limit is right for either.
		r.check = !l.Default
		switch {
		case r.check:
			r.old = strconv.FormatInt(l.Tries-1, 10)
			r.From = strconv.Quote(r.old.(string))
		case strings.Contains(l.Note, linkerdZeroNote):
			r.From = `"0" (1)`
		default:
			r.From = "unset (1)"
		}
		if retries == 0 {
			// The timeout too: Linkerd's policy controller (parse_http_retry) reads a retry
			// timeout alone as a retry policy of limit 1.
			r.remove, r.To = true, "removed, with "+LinkerdRetryHTTP+", "+LinkerdRetryGRPC+" and "+LinkerdRetryTimeout
		} else {
			r.value = strconv.FormatInt(retries, 10)
			r.To = strconv.Quote(r.value.(string))
		}
	} else {
		if strings.HasSuffix(r.FieldPath, ".retries") || strings.HasSuffix(r.FieldPath, ".retry") {
			r.FieldPath += ".attempts"
		} else {
			r.blockExists = true
		}
		r.check, r.absent = !l.Default, l.Default
		if l.Kind == Kuma && l.Default && strings.HasPrefix(name[strings.IndexByte(name, '/')+1:], KumaDefaultRetryPrefix) {
			// The MeshRetry Kuma creates for a new mesh holds numRetries 5 (assumed: not read).
			r.check, r.absent = true, false
		}
		if r.check {
			r.old = l.Tries - 1
			r.From = strconv.FormatInt(l.Tries-1, 10)
		} else {
			r.From = fmt.Sprintf("unset (%d)", l.Tries-1)
		}
		r.value, r.To = retries, strconv.FormatInt(retries, 10)
		if retries == 0 && kind == "VirtualService" && strings.HasSuffix(r.FieldPath, ".retries.attempts") {
			r.only = true
		}
	}
	path, err := parsePath(r.FieldPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.Object, err)
	}
	r.path = path
	r.Suggestion = fmt.Sprintf("%s %s: %s -> %s", r.Object, r.FieldPath, r.From, r.To)
	if r.only {
		r.Suggestion += " (" + IstioZeroAttemptsAlone + ")"
	}
	return r, nil
}

// linkerdRetryKeys are the annotations a Linkerd layer lowered to 1 try loses: any one of them
// left makes Linkerd retry once.
var linkerdRetryKeys = []string{LinkerdRetryHTTP, LinkerdRetryGRPC, LinkerdRetryLimit, LinkerdRetryTimeout}

// ruleRetry reports whether l is a Gateway API route rule's retry (spec.rules[i].retry or its
// attempts), whose CRD bounds attempts at 1: Linkerd's policy.linkerd.io routes give no layer of
// their rules.
func ruleRetry(l Layer) bool {
	kind, _, _ := strings.Cut(l.Object, " ")
	return (kind == "HTTPRoute" || kind == "GRPCRoute") && strings.HasPrefix(l.FieldPath, "spec.rules[") &&
		(strings.HasSuffix(l.FieldPath, ".retry") || strings.HasSuffix(l.FieldPath, ".retry.attempts"))
}

// MinTries is the fewest tries l's own field can give: 2 for a Gateway API route rule's retry
// (the CRD's attempts minimum is 1) unless the rule without its retry block gives 1 (l.Unset:
// Linkerd, which reads no rules[].retry; a Gateway rule no BackendTrafficPolicy covers; Istio
// with a default of 0 retries), else 1. The gate rewrites no lower, the suggestion says so.
func MinTries(l Layer) int64 {
	if ruleRetry(l) && l.Unset != 1 {
		return 2
	}
	return 1
}

// kindRewritable refuses, with what to do instead, the rewrites that the layer's own field cannot
// express in its mesh's unit:
//   - Consul: a destination's numRetries 0 is "unset", which Envoy reads as its default 1 retry
//     (getRetryPolicyForDestination sets num_retries only when > 0): 1 try means removing the
//     retry conditions.
//   - Dapr: with no Resiliency targeting the app, its built-in retries run; a Resiliency retry
//     policy targeting the app replaces them. DaprBuiltInServiceRetries, when redefined, is
//     floored at 3 retries by Dapr.
func kindRewritable(l Layer, tries int64) error {
	switch l.Kind {
	case Consul:
		if tries == 1 && l.FieldPath != "" {
			return fmt.Errorf("%s: %s %s cannot give 1 try (0 is unset, Envoy's 1 retry): remove retryOn, retryOnConnectFailure and retryOnStatusCodes of %s",
				l.Note, l.Object, l.FieldPath, strings.TrimSuffix(l.FieldPath, ".numRetries"))
		}
	case IstioWaypoint:
		if l.Object == "" {
			// waypoint.go: Istio's default route at the waypoint; no object to lower.
			if tries == 1 {
				// An HTTPRoute cannot: attempts is at least 1, and a rule without retry gets
				// Istio's default.
				return fmt.Errorf("%s: no object declares these %d tries; declare the retries for the Service at its waypoint (a VirtualService route with retries.attempts: 0; an HTTPRoute's rules[].retry.attempts is at least 1, 2 tries), or take the Service off the waypoint (label %s: none)",
					l.Note, l.Tries, IstioUseWaypointLabel)
			}
			return fmt.Errorf("%s: no object declares these %d tries; declare the retries for the Service at its waypoint (an HTTPRoute with a parentRef to the Service and rules[].retry.attempts: %d, or a VirtualService route with retries.attempts: %d), or take the Service off the waypoint (label %s: none)",
				l.Note, l.Tries, tries-1, tries-1, IstioUseWaypointLabel)
		}
	case Dapr:
		switch {
		case l.Object == "":
			return fmt.Errorf("%s: declare a Resiliency in the caller's namespace whose spec.targets.apps.<app-id>.retry names a retry policy with maxRetries: %d (it replaces the built-in retries)", l.Note, tries-1)
		case strings.Contains(l.FieldPath, "."+DaprBuiltInServiceRetry+".") && tries-1 < DaprBuiltInRetries:
			return fmt.Errorf("%s: Dapr floors %s at %d retries: set %s %s to %d and target the app with a retry policy of maxRetries: %d (it replaces the built-in retries)",
				l.Note, DaprBuiltInServiceRetry, DaprBuiltInRetries, l.Object, l.FieldPath, DaprBuiltInRetries, tries-1)
		}
	}
	return nil
}

// Apply returns the object (JSON) with the field changed. It fails, naming the object, the field
// and the value, when the object no longer holds the value the layer was computed from.
func (r *Rewrite) Apply(obj []byte) ([]byte, error) {
	out, _, err := r.ApplyChanges(obj)
	return out, err
}

// ApplyChanges is Apply, and the changes made as "FIELD: FROM -> TO": the field's, then a route
// timeout set for the one try left (keepPerTry), which Suggestion cannot name without the object.
func (r *Rewrite) ApplyChanges(obj []byte) ([]byte, []string, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("decoding %s: %w", r.Object, err)
	}
	bound, err := r.applyNoted(doc)
	if err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding %s: %w", r.Object, err)
	}
	changes := []string{r.FieldPath + ": " + r.From + " -> " + r.To}
	if bound != "" {
		changes = append(changes, bound)
	}
	return out, changes, nil
}

// applyTo changes the field in doc (decoded with numbers as json.Number), after the checks.
func (r *Rewrite) applyTo(doc any) error {
	_, err := r.applyNoted(doc)
	return err
}

// applyNoted is applyTo, and keepPerTry's change ("" when none).
func (r *Rewrite) applyNoted(doc any) (string, error) {
	parent, err := r.walk(doc)
	if err != nil {
		return "", err
	}
	last := r.path[len(r.path)-1].(string)
	cur, ok := parent[last]
	field := r.FieldPath
	if r.inner != "" {
		block, isMap := cur.(map[string]any)
		if !isMap {
			return "", fmt.Errorf("%s %s is %s, not %s: the object changed since the layer was read", r.Object, r.FieldPath, show(cur, ok), r.From)
		}
		cur, ok = block[r.inner]
		field += "." + r.inner
	}
	if r.absent && ok || r.check && !sameValue(cur, r.old) {
		return "", fmt.Errorf("%s %s is %s, not %s: the object changed since the layer was read", r.Object, field, show(cur, ok), r.From)
	}
	switch {
	case r.remove && r.inner != "":
		delete(parent, last)
	case r.remove:
		for _, k := range linkerdRetryKeys {
			delete(parent, k)
		}
	case r.only:
		perTry := parent["perTryTimeout"]
		clear(parent)
		parent[last] = r.value
		return r.keepPerTry(doc, perTry), nil
	default:
		parent[last] = r.value
	}
	return "", nil
}

// keepPerTry bounds the route of a retries block lowered to attempts 0 (Rewrite.only) by the
// per-try timeout the block had (perTry, as written): Istio gives Envoy no retry policy for attempts
// 0 (retry.ConvertPolicy), so the per-try timeout goes with it and the one try left was bounded by
// nothing of the route's; the rewrite would have made the route wait longer than as sent (one try
// of 9s, then unbounded). The route's timeout, which Envoy applies to the whole request, becomes the
// per-try timeout where it is unset or longer: the one try is bounded as its first try was. A
// value either side that is no duration Istio reads is left alone (the Set refused it already).
func (r *Rewrite) keepPerTry(doc any, perTry any) string {
	pt, ok := perTry.(string)
	if !ok || len(r.path) < 2 {
		return ""
	}
	d, err := parseTime(r.Object, r.FieldPath, &pt, goGrammar)
	if err != nil || d <= 0 {
		return ""
	}
	cur, ok := follow(doc, tokens(r.path[:len(r.path)-2]))
	route, isMap := cur.(map[string]any)
	if !ok || !isMap {
		return ""
	}
	from := "unset"
	if t, set := route["timeout"]; set {
		ts, isString := t.(string)
		if !isString {
			return ""
		}
		td, err := parseTime(r.Object, r.FieldPath, &ts, goGrammar)
		if err != nil || td > 0 && td <= d {
			return ""
		}
		from = strconv.Quote(ts)
	}
	route["timeout"] = pt
	return pathString(r.path[:len(r.path)-2]) + ".timeout: " + from + " -> " + strconv.Quote(pt)
}

// ZeroAttempts reports whether r lowers a VirtualService route's retries to attempts 0 (the
// block's other fields go; a per-try timeout may become the route's timeout: keepPerTry).
func (r *Rewrite) ZeroAttempts() bool { return r.only }

// RemovesBlock reports whether r removes a route rule's retry block (to 1 try, where the rule
// without it gives 1: MinTries).
func (r *Rewrite) RemovesBlock() bool { return r.remove && r.inner != "" }

// Patch is the RFC 6902 JSON patch from obj to Apply(obj): what a mutating webhook returns.
func (r *Rewrite) Patch(obj []byte) ([]byte, error) {
	out, err := r.Apply(obj)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(obj, out)
	if err != nil {
		return nil, fmt.Errorf("diffing %s: %w", r.Object, err)
	}
	return json.Marshal(ops)
}

// StaticPatch is the patch that needs no copy of the object, for `kubectl patch --type TYPE -p
// PATCH` and a client's RawPatch: an RFC 6902 JSON patch ("json"), with a test of each value the
// change was computed from, or, for Linkerd's annotations, a JSON merge patch ("merge"). obj is
// read for what the change depends on beyond the field, and checked as Apply checks it: a route
// lowered to attempts 0 takes its per-try timeout as its timeout (keepPerTry), as the webhook's
// rewrite does. Without that op the patch left the one try unbounded where Apply bounded it
// (gate19); Patch, given the object, diffs it instead.
func (r *Rewrite) StaticPatch(obj []byte) (typ string, patch []byte, err error) {
	out, err := r.Apply(obj)
	if err != nil {
		return "", nil, err
	}
	if len(r.path) == 3 && r.path[0] == "metadata" && r.path[1] == "annotations" {
		ann := map[string]any{}
		if r.remove {
			for _, k := range linkerdRetryKeys {
				ann[k] = nil
			}
		} else {
			ann[r.path[2].(string)] = r.value
		}
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return "merge", data, nil
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	// The route's timeout as sent and as Apply leaves it.
	timeoutBefore, timeoutAfter, hadTimeout, err := r.routeTimeouts(obj, out)
	if err != nil {
		return "", nil, err
	}
	var ops []op
	ptr := pointer(r.path)
	switch {
	case r.remove && r.check:
		ops = []op{{"test", ptr + "/" + r.inner, r.old}, {"remove", ptr, nil}}
	case r.remove:
		ops = []op{{"remove", ptr, nil}}
	case r.only && r.check:
		block := pointer(r.path[:len(r.path)-1])
		ops = []op{{"test", ptr, r.old}, {"replace", block, map[string]any{r.path[len(r.path)-1].(string): r.value}}}
	case r.only && r.blockExists:
		ops = []op{{"replace", pointer(r.path[:len(r.path)-1]), map[string]any{r.path[len(r.path)-1].(string): r.value}}}
	case r.check:
		ops = []op{{"test", ptr, r.old}, {"replace", ptr, r.value}}
	default:
		// The block may be missing too: add it whole ("spec.http[1].retries" was unset).
		ops = []op{{"add", pointer(r.path[:len(r.path)-1]), map[string]any{r.path[len(r.path)-1].(string): r.value}}}
		if r.blockExists {
			ops = []op{{"add", ptr, r.value}}
		}
	}
	if r.only && timeoutAfter != timeoutBefore {
		// The timeout is the per-try timeout the block had: tested first, as the attempts are.
		ops = append([]op{{"test", pointer(r.path[:len(r.path)-1]) + "/perTryTimeout", timeoutAfter}}, ops...)
		tp := pointer(append(slices.Clone(r.path[:len(r.path)-2]), "timeout"))
		if hadTimeout {
			ops = append(ops, op{"test", tp, timeoutBefore}, op{"replace", tp, timeoutAfter})
		} else {
			ops = append(ops, op{"add", tp, timeoutAfter})
		}
	}
	data, _ := json.Marshal(ops)
	return "json", data, nil
}

// routeTimeouts are, for a lowering to attempts 0 (r.only), the route's timeout in obj and in
// out, Apply(obj) (hadTimeout: obj sets one). Other rewrites touch no timeout: "", "", false.
func (r *Rewrite) routeTimeouts(obj, out []byte) (before, after string, hadTimeout bool, err error) {
	if !r.only || len(r.path) < 2 {
		return "", "", false, nil
	}
	timeout := func(data []byte) (string, bool, error) {
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			return "", false, fmt.Errorf("decoding %s: %w", r.Object, err)
		}
		cur, ok := follow(doc, tokens(r.path[:len(r.path)-2]))
		route, isMap := cur.(map[string]any)
		if !ok || !isMap {
			return "", false, nil
		}
		t, set := route["timeout"]
		ts, _ := t.(string)
		return ts, set, nil
	}
	if before, hadTimeout, err = timeout(obj); err != nil {
		return "", "", false, err
	}
	after, _, err = timeout(out)
	return before, after, hadTimeout, err
}

// pointer is the RFC 6901 JSON pointer of a path.
func pointer(path []any) string {
	var b strings.Builder
	for _, t := range path {
		b.WriteByte('/')
		switch t := t.(type) {
		case int:
			b.WriteString(strconv.Itoa(t))
		case string:
			b.WriteString(pointerEscaper.Replace(t))
		}
	}
	return b.String()
}

// walk returns the map that holds the last key of the path, creating missing maps on the way.
func (r *Rewrite) walk(doc any) (map[string]any, error) {
	cur := doc
	for i, tok := range r.path[:len(r.path)-1] {
		switch t := tok.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s %s: %s is not an object", r.Object, r.FieldPath, pathString(r.path[:i]))
			}
			next, ok := m[t]
			if !ok || next == nil {
				next = map[string]any{}
				m[t] = next
			}
			cur = next
		case int:
			a, ok := cur.([]any)
			if !ok || t >= len(a) {
				return nil, fmt.Errorf("%s %s: %s has no item %d", r.Object, r.FieldPath, pathString(r.path[:i]), t)
			}
			cur = a[t]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s: %s is not an object", r.Object, r.FieldPath, pathString(r.path[:len(r.path)-1]))
	}
	return m, nil
}

func sameValue(cur, old any) bool {
	switch o := old.(type) {
	case int64:
		if v, ok := cur.(int64); ok {
			return v == o // set by an earlier rewrite of the same Doc
		}
		n, ok := cur.(json.Number)
		v, err := n.Int64()
		return ok && err == nil && v == o
	case string:
		s, ok := cur.(string)
		return ok && s == o
	}
	return false
}

func show(v any, ok bool) string {
	if !ok {
		return "unset"
	}
	if s, isString := v.(string); isString {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// parsePath reads "spec.http[0].retries.attempts" and `metadata.annotations["a/b"]`.
func parsePath(p string) ([]any, error) {
	var out []any
	rest := p
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, `["`):
			end := strings.Index(rest, `"]`)
			if end < 0 {
				return nil, fmt.Errorf("field path %q: unterminated key", p)
			}
			out = append(out, rest[2:end])
			rest = rest[end+2:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			n, err := strconv.Atoi(rest[1:max(end, 1)])
			if end < 0 || err != nil {
				return nil, fmt.Errorf("field path %q: bad index", p)
			}
			out = append(out, n)
			rest = rest[end+1:]
		case rest[0] == '.':
			rest = rest[1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			out = append(out, rest[:end])
			rest = rest[end:]
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("field path %q is empty", p)
	}
	if _, ok := out[len(out)-1].(string); !ok {
		return nil, fmt.Errorf("field path %q ends in an index", p)
	}
	return out, nil
}

func pathString(p []any) string {
	var b strings.Builder
	for _, t := range p {
		switch t := t.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", t)
		case string:
			if strings.ContainsAny(t, "./") {
				fmt.Fprintf(&b, "[%q]", t)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(t)
		}
	}
	return b.String()
}
