"""RepeatedPlan without a GPU: which repetitions are replayed from a graph, which are launched
one by one, and when the graph is captured again."""

from app.compute import graphs


class FakeGraph:
    captured: list = []

    def __init__(self, stream, issue):
        self.log = stream
        start = len(stream)
        issue()
        FakeGraph.captured.append(stream[start:])
        del stream[start:]                          # captured, not run
        self.body = FakeGraph.captured[-1]
        self.closed = False

    def launch(self):
        self.log.extend(self.body)

    def close(self):
        self.closed = True


class FakeLaunch:
    def __init__(self, log, name, arg=0):
        self.log, self.name, self.arg = log, name, arg

    def __call__(self):
        self.log.append(self.name)

    @property
    def key(self):
        return (self.name, self.arg)


def test_whole_runs_come_from_one_graph_and_the_rest_one_by_one(monkeypatch):
    monkeypatch.setattr(graphs, "CapturedGraph", FakeGraph)
    FakeGraph.captured = []
    log: list = []
    plan = [FakeLaunch(log, "a"), FakeLaunch(log, "b")]
    rep = graphs.RepeatedPlan(log, 3)
    rep.run(plan, 7)
    assert log == ["a", "b"] * 7
    assert len(FakeGraph.captured) == 1 and FakeGraph.captured[0] == ["a", "b"] * 3
    assert rep.replays == 2
    rep.run(plan, 2)                                # too few for a replay: no capture
    rep.run(plan, 3)                                # same launches: the graph is kept
    assert len(FakeGraph.captured) == 1 and rep.replays == 3
    assert log == ["a", "b"] * 12


def test_changed_arguments_capture_a_new_graph(monkeypatch):
    monkeypatch.setattr(graphs, "CapturedGraph", FakeGraph)
    FakeGraph.captured = []
    log: list = []
    rep = graphs.RepeatedPlan(log, 2)
    rep.run([FakeLaunch(log, "a", 1)], 2)
    first = rep._graph
    rep.run([FakeLaunch(log, "a", 2)], 4)
    assert len(FakeGraph.captured) == 2 and first.closed and rep.replays == 3
    rep.close()
    assert rep._graph is None
