// Package workloadtest holds the workloads, Services and policies that the tests of the index
// and of the gate both build: the gate's tests compare verdicts over the index with verdicts
// over the whole namespace, the index's tests compare a long-lived index with a fresh one, and
// both must draw the same random namespaces from the same seeds; analyze's property test of
// -o patch draws its namespaces there too. Test code only: nothing
// outside *_test.go files imports it.
package workloadtest
