package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestShardingDocs: the shipped GitHub Actions workflow and Kubernetes manifests
// parse, run the three shards through the real engines' own fan-out (a matrix, an
// Indexed Job keyed by JOB_COMPLETION_INDEX) and merge them.
func TestShardingDocs(t *testing.T) {
	gha, err := os.ReadFile(filepath.Join("..", "docs", "github-actions-conformance.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Needs    any `json:"needs"`
			Strategy struct {
				Matrix struct {
					Shard []int `json:"shard"`
				} `json:"matrix"`
			} `json:"strategy"`
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(gha, &wf); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if len(wf.Jobs["shard"].Strategy.Matrix.Shard) != 3 || wf.Jobs["merge"].Needs != "shard" {
		t.Fatalf("workflow jobs: %+v", wf.Jobs)
	}
	var runs []string
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			runs = append(runs, s.Run)
		}
	}
	all := strings.Join(runs, "\n")
	if !strings.Contains(all, "--shard ${{ matrix.shard }}/3") || !strings.Contains(all, "conformance merge") {
		t.Fatalf("workflow steps:\n%s", all)
	}

	k8s, err := os.ReadFile(filepath.Join("..", "docs", "k8s-conformance-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	indexed := false
	for _, doc := range strings.Split(string(k8s), "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				CompletionMode string `json:"completionMode"`
				Completions    int    `json:"completions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("manifest: %v", err)
		}
		kinds = append(kinds, obj.Kind)
		if obj.Kind == "Job" && obj.Spec.CompletionMode == "Indexed" && obj.Spec.Completions == 3 {
			indexed = true
		}
	}
	if !indexed || strings.Join(kinds, ",") != "PersistentVolumeClaim,Job,Job" ||
		!strings.Contains(string(k8s), "JOB_COMPLETION_INDEX") || !strings.Contains(string(k8s), "conformance\", \"merge\"") {
		t.Fatalf("manifest kinds %v, indexed %v", kinds, indexed)
	}
}
