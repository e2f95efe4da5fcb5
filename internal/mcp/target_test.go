package mcp

import "testing"

func TestTargetOf(t *testing.T) {
	tests := []struct {
		method, params string
		ok             bool
		kind           Kind
		field          string
	}{
		{MethodToolsCall, `{}`, true, KindTool, "name"},
		{MethodPromptsGet, `{}`, true, KindPrompt, "name"},
		{MethodResourcesRead, `{}`, true, KindResource, "uri"},
		{MethodResourcesSubscribe, `{}`, true, KindResource, "uri"},
		{MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"p"}}`, true, KindPrompt, "ref.name"},
		{MethodCompletionComplete, `{"ref":{"type":"ref/resource","uri":"u"}}`, true, KindResource, "ref.uri"},
		{MethodCompletionComplete, `{"ref":{"type":"ref/other"}}`, false, "", ""},
		{MethodCompletionComplete, `{}`, false, "", ""},
		{MethodToolsList, `{}`, false, "", ""},
		{MethodTasksGet, `{}`, true, KindTask, "taskId"},
		{MethodTasksResult, `{}`, true, KindTask, "taskId"},
		{MethodTasksCancel, `{}`, true, KindTask, "taskId"},
		{MethodTasksUpdate, `{}`, true, KindTask, "taskId"},
		{MethodTasksList, `{}`, false, "", ""},
		{MethodSkillsGet, `{}`, true, KindResource, "uri"},
		{MethodResourcesDirectoryRead, `{}`, true, KindResource, "uri"},
		{MethodSkillsList, `{}`, false, "", ""},
	}
	for _, tt := range tests {
		got, ok := TargetOf(tt.method, []byte(tt.params))
		if ok != tt.ok || got.Kind != tt.kind || (ok && got.Field() != tt.field) {
			t.Errorf("TargetOf(%s, %s) = %+v, %v; want %s %s, %v", tt.method, tt.params, got, ok, tt.kind, tt.field, tt.ok)
		}
		if ok && !Routed(tt.method) {
			t.Errorf("Routed(%s) = false for a method with a target", tt.method)
		}
	}
}
