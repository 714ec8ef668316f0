"""explain agrees with the queue (issue 18): for every pending job of a generated state (a busy
stretch of the demo cluster, jobs submitted through the API on top), its place in line, its place
in its group, the jobs of its own group ahead and the groups ahead come from the order
`GET /api/jobs?state=pending` lists; the summary names the larger of its own group and the others."""

from __future__ import annotations

from collections import Counter

from .live_helpers import Live


def test_explain_agrees_with_the_queue_for_every_pending_job(live: Live) -> None:
    for k in range(6):  # jobs no pass has ordered yet count too
        body = {"job_id": f"late-{k}", "group": "ml/nlp", "class": "debug", "gpus": 8, "estimate": "1h"}
        assert live.post("admin", "/api/jobs", json=body).status_code == 201
    queue = live.get("viewer", "/api/jobs?state=pending").json()["jobs"]
    assert len(queue) > 10
    ids = [j["id"] for j in queue]
    group_of = {j["id"]: j["group"] for j in queue}
    for i, jid in enumerate(ids):
        ex = live.get("viewer", f"/api/jobs/{jid}/explain").json()
        ahead = ids[:i]
        mine = group_of[jid]
        same = sum(1 for a in ahead if group_of[a] == mine)
        assert ex["position"] == i + 1 and ex["queue_length"] == len(ids), (jid, ex["position"], i)
        assert ex["group_position"] == same + 1 and ex["same_group_ahead"] == same
        assert ex["group_queue_length"] == sum(1 for j in ids if group_of[j] == mine)
        others = Counter(group_of[a] for a in ahead if group_of[a] != mine)
        assert sum(g["jobs_ahead"] for g in ex["loses_to"]) == sum(others.values())
        for g in ex["loses_to"]:  # each side's count is the jobs ahead under that side
            side = g["group"]
            assert g["jobs_ahead"] == sum(
                n for grp, n in others.items() if grp == side or grp.startswith(side + "/")
            )
        top = ex["loses_to"][0]["jobs_ahead"] if ex["loses_to"] else 0
        if same and same >= top:
            assert f"its own group's ({same})" in ex["summary"], ex["summary"]
        elif top:
            assert f"({top})" in ex["summary"] and "come from" in ex["summary"]
        assert f"#{i + 1} in the queue" in ex["summary"]
