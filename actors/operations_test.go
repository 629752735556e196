package actors

import (
	"testing"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clusterview"
)

// An abort's result crosses from the cluster view to the API by its text:
// each of the view's results is one the API names.
func TestEveryAbortResultOfTheViewIsOneTheAPINames(t *testing.T) {
	for view, want := range map[clusterview.AbortResult]api.AbortResult{
		clusterview.Aborted: api.Aborted, clusterview.AbortNoMove: api.AbortNoMove, clusterview.AbortRefused: api.AbortRefused,
		clusterview.AbortNotFound: api.AbortNotFound, clusterview.AbortUnknown: api.AbortUnknown,
	} {
		if api.AbortResult(view) != want {
			t.Errorf("the view's %q reads %q in the API, want %q", view, api.AbortResult(view), want)
		}
	}
}
