package workload

import (
	"fmt"
	"strings"
)

// MaxOverriddenListed is how many workloads Overridden names; the rest are counted.
const MaxOverriddenListed = 10

// Overridden says which of self's selected workloads run another policy's proxy settings: a
// workload several policies select is injected with the strictest's (CompareRefs, as the
// injector and the gate order them) spec.retry, spec.budget, spec.circuitBreaker and
// spec.observability, so self's are not the ones its proxies run. Every selecting policy's cap is
// still enforced at admission; only the settings are one policy's. Each listed workload is named
// with the policy it runs ("Deployment shop/gateway (RetryPolicy shop/strict)"), at most
// MaxOverriddenListed, the rest counted; "" when none, or when self injects nothing (a policy
// with injection disabled renders no settings). others are the other policies whose scope may
// hold the workloads (either kind; self among them is skipped); one with an invalid selector or
// injection disabled renders nothing and is skipped too.
func Overridden(self *Policy, selected []Workload, others []*Policy) string {
	if !injects(self) {
		return ""
	}
	var stricter []*Policy
	for _, q := range others {
		if q.Ref() != self.Ref() && injects(q) && q.SelectorErr() == nil && CompareRefs(q.Ref(), self.Ref()) < 0 {
			stricter = append(stricter, q)
		}
	}
	if len(stricter) == 0 {
		return ""
	}
	var listed []string
	n := 0
	for _, w := range selected {
		var by *Policy
		for _, q := range stricter {
			if q.selects(w) && (by == nil || CompareRefs(q.Ref(), by.Ref()) < 0) {
				by = q
			}
		}
		if by == nil {
			continue
		}
		n++
		if len(listed) < MaxOverriddenListed {
			listed = append(listed, fmt.Sprintf("%s (%s)", w, by.Ref()))
		}
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > len(listed) {
		more = fmt.Sprintf(" and %d more", n-len(listed))
	}
	return fmt.Sprintf("%d selected workload(s) are also selected by a stricter policy, whose spec.retry, spec.budget, spec.circuitBreaker and spec.observability their injected proxies run instead of this policy's (every selecting policy's cap is still enforced): %s%s",
		n, strings.Join(listed, ", "), more)
}

// injects reports whether p's settings can be rendered into a proxy: injection not disabled.
func injects(p *Policy) bool {
	e := p.Spec().Injection.Enabled
	return e == nil || *e
}
