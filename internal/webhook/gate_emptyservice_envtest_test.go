package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// retrycap.dev/service: "" (a chart's template that rendered no value) on a Deployment a policy
// selects: before, the gate read it as absent and admitted the workload under its label's or
// name's service, which its callers do not call; now it is denied, naming the workload and the
// annotation, as any malformed retrycap annotation is.
var _ = Describe("workload gate: an empty retrycap.dev/service", func() {
	It("denies it, naming the workload and the annotation", func() {
		ctx := context.Background()
		const ns = "gate-empty-service"
		gateNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementAudit))
		d := gateDeployment(ns, "gw-7f9c", "order=2", partOfShop)
		d.Spec.Template.Annotations[annotations.Service] = ""
		err := k8sClient.Create(ctx, d)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(gateDenied + "Deployment " + ns + "/gw-7f9c: annotation retrycap.dev/service: service name is empty (a template that rendered no value?): write the name, or remove the annotation to name the service by label app.kubernetes.io/name, else the workload's name"))
	})
})
