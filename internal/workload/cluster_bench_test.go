package workload

import (
	"fmt"
	"slices"
	"testing"
)

// chains is n workloads in nss namespaces, chains of four services in each: s(4j) -> s(4j+1) ->
// s(4j+2) -> s(4j+3), whose last calls s(4j) of the next namespace ("s0.team-01"), or the leaf
// db in the last namespace: a cluster graph is chains across all namespaces, a namespaced one
// has a leaf per chain. No cycles.
func chains(n, nss int) []*Parsed {
	ps := make([]*Parsed, 0, n)
	per := n / nss
	for k := range nss {
		ns := fmt.Sprintf("team-%02d", k)
		for i := range per {
			up := fmt.Sprintf("s%d=2", i+1)
			if i%4 == 3 {
				up = "db=2"
				if k+1 < nss {
					up = fmt.Sprintf("s%d.team-%02d=2", i-3, k+1)
				}
			}
			ps = append(ps, Parse(deploy(ns, fmt.Sprintf("s%d", i), up, nil)))
		}
	}
	slices.SortFunc(ps, compareParsed)
	return ps
}

// BenchmarkBuild compares a cluster policy's graph of 5,000 workloads in 10 namespaces with a
// RetryPolicy's of 5,000 in one (the anchor): the naming is the only extra work.
//
//	go test ./internal/workload -run '^$' -bench 'BenchmarkBuild' -benchmem
func BenchmarkBuild(b *testing.B) {
	b.Run("RetryPolicy/5000x1ns", func(b *testing.B) {
		ps := chains(5000, 1)
		p := policy("team-00", "p", 1000)
		b.ReportAllocs()
		for b.Loop() {
			BuildParsed(ForRetryPolicy(p), ps, nil, nil)
		}
	})
	b.Run("ClusterRetryPolicy/5000x10ns", func(b *testing.B) {
		ps := chains(5000, 10)
		nsLabels := map[string]map[string]string{}
		for k := range 10 {
			nsLabels[fmt.Sprintf("team-%02d", k)] = map[string]string{"chain": "all"}
		}
		p := clusterPolicy("all", 1000, map[string]string{"chain": "all"})
		s, err := NewClusterScope(p, nsLabels)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			BuildParsed(ForClusterRetryPolicy(p, s), ps, nil, nil)
		}
	})
}

// BenchmarkJudge is the gate's prepared path: Base.Judge of one incoming workload, namespaced
// (anchor) and cluster.
//
//	go test ./internal/workload -run '^$' -bench 'BenchmarkJudge' -benchmem
func BenchmarkJudge(b *testing.B) {
	b.Run("RetryPolicy/5000x1ns", func(b *testing.B) {
		ps := chains(5000, 1)
		base := NewBase(ForRetryPolicy(policy("team-00", "p", 1000)), ps, nil, nil)
		in := Parse(deploy("team-00", "s10", "s11=3", nil))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := base.Judge(in); !ok {
				b.Fatal("not answered")
			}
		}
	})
	b.Run("ClusterRetryPolicy/5000x10ns", func(b *testing.B) {
		ps := chains(5000, 10)
		p := clusterPolicy("all", 1000, nil)
		base := NewBase(ForClusterRetryPolicy(p, NewClusterScopeOf("team-00", "team-01", "team-02", "team-03", "team-04", "team-05", "team-06", "team-07", "team-08", "team-09")), ps, nil, nil)
		in := Parse(deploy("team-03", "s10", "s11=3", nil))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := base.Judge(in); !ok {
				b.Fatal("not answered")
			}
		}
	})
}

// BenchmarkIncremental is one workload's upstream change at 20,000 workloads in one namespace:
// patched (Incremental.Update, then the analysis) against the build it replaces (the anchor),
// without and with a Service per workload (the notes are made again on each patch).
//
//	go test ./internal/workload -run '^$' -bench 'BenchmarkIncremental' -benchmem
func BenchmarkIncremental(b *testing.B) {
	const n = 20000
	for _, withServices := range []bool{false, true} {
		ps := chains(n, 1)
		var svcs *ServiceSet
		name := "no Services"
		if withServices {
			name = "a Service per workload"
			list := make([]Service, n)
			for i, x := range ps {
				list[i] = Service{Namespace: "team-00", Name: x.service, Selector: map[string]string{"app": x.service}}
				w := x.Workload
				w.Labels = PairsFrom("app", x.service)
				ps[i] = Parse(w)
			}
			svcs = NewServiceSet(list)
		}
		p := policy("team-00", "p", 1000)
		// Two versions of the last workload's upstreams, alternately.
		last := ps[len(ps)-1].Workload
		versions := [2][]*Parsed{slices.Clone(ps), slices.Clone(ps)}
		for k, up := range []string{"db=2, extra-a=2", "db=3"} {
			w := last
			w.Annotations = w.Annotations.With("retrycap.dev/upstreams", up)
			versions[k][len(ps)-1] = Parse(w)
		}
		b.Run(name+"/build", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				BuildParsed(ForRetryPolicy(p), versions[i%2], svcs, nil).Analyze()
				i++
			}
		})
		if !withServices {
			// A rollout of a new service: the last workload added and removed, alternately.
			added := [2][]*Parsed{ps, ps[:len(ps)-1]}
			b.Run(name+"/add-remove build", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					BuildParsed(ForRetryPolicy(p), added[i%2], svcs, nil).Analyze()
					i++
				}
			})
			b.Run(name+"/add-remove patch", func(b *testing.B) {
				inc := NewIncremental(ForRetryPolicy(p), added[1], svcs, nil)
				inc.Update(ForRetryPolicy(p), added[0], svcs, nil) // the patch's index, once
				b.ReportAllocs()
				i := 1
				for b.Loop() {
					if !inc.Update(ForRetryPolicy(p), added[i%2], svcs, nil) {
						b.Fatal("not patched")
					}
					inc.Result().Analyze()
					i++
				}
			})
		}
		b.Run(name+"/patch", func(b *testing.B) {
			inc := NewIncremental(ForRetryPolicy(p), versions[1], svcs, nil)
			inc.Update(ForRetryPolicy(p), versions[0], svcs, nil) // the patch's index, once
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !inc.Update(ForRetryPolicy(p), versions[i%2], svcs, nil) {
					b.Fatal("not patched")
				}
				inc.Result().Analyze()
				i++
			}
		})
	}
}

// BenchmarkClusterIncremental is BenchmarkIncremental for a ClusterRetryPolicy over 20,000
// workloads in 10 namespaces without Services: one workload's upstreams changed, patched
// (Incremental.UpdateCluster, then the analysis) against the build (the anchor).
//
//	go test ./internal/workload -run '^$' -bench 'BenchmarkClusterIncremental' -benchmem
func BenchmarkClusterIncremental(b *testing.B) {
	ps := chains(20000, 10)
	p := clusterPolicy("c", 1000, map[string]string{})
	s := NewClusterScopeOf(namespacesOf(ps)...)
	last := ps[len(ps)-1].Workload
	versions := [2][]*Parsed{slices.Clone(ps), slices.Clone(ps)}
	for k, up := range []string{"db=2, extra-a=2", "db=3"} {
		w := last
		w.Annotations = w.Annotations.With("retrycap.dev/upstreams", up)
		versions[k][len(ps)-1] = Parse(w)
	}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			BuildParsed(ForClusterRetryPolicy(p, s), versions[i%2], nil, nil).Analyze()
			i++
		}
	})
	b.Run("patch", func(b *testing.B) {
		inc := NewIncremental(ForClusterRetryPolicy(p, s), versions[1], nil, nil)
		inc.Update(ForClusterRetryPolicy(p, s), versions[0], nil, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if !inc.Update(ForClusterRetryPolicy(p, s), versions[i%2], nil, nil) {
				b.Fatal("not patched")
			}
			inc.Result().Analyze()
			i++
		}
	})
}

func namespacesOf(ps []*Parsed) []string {
	var out []string
	for _, x := range ps {
		if len(out) == 0 || out[len(out)-1] != x.Workload.Namespace {
			out = append(out, x.Workload.Namespace)
		}
	}
	return out
}
