from wai_exp.rows import task_key


def test_task_key_prefers_scenario_then_task_then_prompt():
    assert task_key({"scenario_id": "s1", "task_id": "t1", "prompt": "p"}) == "s1"
    assert task_key({"task_id": "t1", "prompt": "p"}) == "t1"
    assert task_key({"prompt": "p"}) == "p"
    assert task_key({"scenario_id": "", "task_id": None, "prompt": "p"}) == "p"
    assert task_key({}) == ""


def test_task_key_is_a_string_for_numeric_ids():
    assert task_key({"task_id": 7}) == "7"
