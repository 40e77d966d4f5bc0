package webhook

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// adv20: a verdict's levers (workload.Result.Levers) named every factor above 1 on the chain. A
// 40-hop chain named 38 Deployments' annotations: the Audit warning was 5,247 bytes, over what the
// API server keeps of a request's warnings (each cut to 256 characters once they pass 4,096 in
// all: k8s.io/apiserver pkg/endpoints/filters/warning.go truncateAtTotalRunes,
// truncateItemRunes), so the gate's own budget (gate.WarningBudget) cut it at 3,300 characters,
// mid-lever: the client never read "or raise ... spec.maxAmplification" nor "(admitted:
// enforcement is Audit)". The levers are bounded (workload.MaxLevers, the most tries first) and
// the rest counted; the whole warning, 2,764 characters, reaches the client.
var _ = Describe("adv20: the levers of a 40-hop chain", Ordered, func() {
	ctx := context.Background()
	const ns = "adv20-levers"
	step := func(i int) string { return fmt.Sprintf("checkout-step-%02d", i) }

	It("an Audit warning names at most MaxLevers levers and reaches the client whole", func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// gateway -x3-> step-01 -x2-> step-02 ... -x2-> step-38 (created last) -x1-> step-39;
		// step-20 -x3-> step-21: the two levers of 3 tries are chosen first.
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", step(1)+"=3", partOfShop))).To(Succeed())
		names := []string{"gateway"}
		for i := 1; i < 38; i++ {
			n := 2
			if i == 20 {
				n = 3
			}
			Expect(k8sClient.Create(ctx, gateDeployment(ns, step(i), fmt.Sprintf("%s=%d", step(i+1), n), partOfShop))).To(Succeed())
			names = append(names, step(i))
		}
		policy := gatePolicy(ns, 4, v1alpha1.EnforcementAudit)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			for _, name := range names {
				_, ok := indexedDeployment(ns, name)
				g.Expect(ok).To(BeTrue(), "Deployment %s/%s in the workload index", ns, name)
			}
		}, cacheWait).Should(Succeed())

		c, warnings := gateClient()
		Expect(c.Create(ctx, gateDeployment(ns, step(38), step(39)+"=1", partOfShop))).To(Succeed())
		got := warnings.take()
		for _, w := range got {
			GinkgoWriter.Printf("warning (%d runes): %s\n", utf8.RuneCountInString(w), w)
		}
		var chain strings.Builder
		chain.WriteString("gateway -x3-> " + step(1))
		for i := 1; i < 38; i++ {
			n := 2
			if i == 20 {
				n = 3
			}
			fmt.Fprintf(&chain, " -x%d-> %s", n, step(i+1))
		}
		lever := func(from string, i, n int) string {
			return fmt.Sprintf("Deployment %s/%s retrycap.dev/upstreams %s=%d", ns, from, step(i), n)
		}
		levers := []string{lever("gateway", 1, 3)}
		for i := 1; i <= 6; i++ {
			levers = append(levers, lever(step(i), i+1, 2))
		}
		levers = append(levers, lever(step(20), 21, 3), fmt.Sprintf("and %d more of at most 2 tries each", 38-workload.MaxLevers))
		Expect(got).To(HaveLen(1))
		over := chain.String() + " -x1-> " + step(39) + " = 618475290624 > cap 4"
		Expect(got[0]).To(Equal("RetryPolicy " + ns + "/checkout: " + over + "; no rewrite fits: even with " + step(38) + ": " + step(39) + "=1, " + over +
			": lower " + strings.Join(levers, ", ") + ", or raise RetryPolicy " + ns + "/checkout spec.maxAmplification: 4 (admitted: enforcement is Audit)"))
		Expect(utf8.RuneCountInString(got[0])).To(Equal(2764), "within the API server's 4,096")
	})
})
