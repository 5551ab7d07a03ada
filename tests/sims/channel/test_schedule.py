"""The CUDA kernel's protocol program, run by a float64 interpreter against cpu.simulate."""

import numpy as np
import pytest

from app.sims.channel import cpu, schedule
from app.sims.channel.numerics import expm, propagate, steady_state
from app.sims.channel.protocol import Op, ProtocolSpec, Segment, compile_protocols
from app.sims.channel.schedule import APPLY, EXPM, NO_SLOT, RAMP, STEADY

from .helpers import model, preset

RAMPS = [ProtocolSpec(name="ramps", holding=-100.0, dt=0.1, segments=[
    Segment(-100.0, 5.0), Segment(-100.0, 3.05, to=-60.0),
    Segment(-60.0, 20.0, True, to=40.0), Segment(40.0, 10.0, True, to=-120.0),
    Segment(-120.0, 5.0, True)]),
    ProtocolSpec(name="steps", holding=-90.0, dt=0.1, segments=[
        Segment(40.0, 20.0), Segment(-60.0, 5.0, True), Segment(-100.0, 3.0, True)])]


def interpret(program, m, protocol, params):
    """What the kernel computes, in float64 with the reference's numerics."""
    out = np.full((len(params), protocol.n_points), np.nan)
    slots: dict[int, np.ndarray] = {}
    e = None
    g = params[:, m.conductance]
    for ins in program:
        if ins.kind == STEADY:
            p = steady_state(m.q_matrix(params, ins.v))
        elif ins.kind == EXPM:
            e = expm(m.q_matrix(params, ins.v) * ins.tau)
            continue
        else:
            op = Op(ins.v, ins.tau, ins.n, ins.record >= 0, ins.v_end)
            p = slots[ins.src]
            if ins.kind == RAMP:
                states = cpu.ramp_states(m, params, op, p)
            elif op.record:
                states = propagate(e, p, op.n)
            else:
                states = (np.linalg.matrix_power(e, op.n) @ p[:, :, None]).transpose(0, 2, 1)
            p = states[:, -1]
            if op.record:
                assert np.isnan(out[:, ins.record:ins.record + op.n]).all()     # each point once
                out[:, ins.record:ins.record + op.n] = (g[:, None] * states[..., m.open_mask].sum(-1)
                                                        * (op.step_voltages() - m.e_rev))
        if ins.dst != NO_SLOT:
            slots[ins.dst] = p
    return out


@pytest.mark.parametrize("slots", [schedule.SLOTS, 1])
@pytest.mark.parametrize("which", ["paper", "ramps"])
def test_program_computes_the_reference_currents(which, slots):
    m = model("model-b")
    protocol = preset().protocol() if which == "paper" else compile_protocols(RAMPS)
    rng = np.random.default_rng()
    params = m.lower + (m.upper - m.lower) * rng.uniform(0.02, 0.5, (6, m.n_params))
    program = schedule.schedule(protocol, slots)
    assert len(program) <= len(protocol.sweeps) + 2 * sum(len(s.ops) for s in protocol.sweeps)
    assert max(i.dst for i in program if i.dst != NO_SLOT) < slots
    got = interpret(program, m, protocol, params)
    reference = cpu.simulate(m, protocol, params)
    np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())


def test_paper_protocol_shares_its_exponentials_and_steady_state():
    protocol = preset().protocol()
    program = schedule.schedule(protocol)
    kinds = [i.kind for i in program]
    # 13 activation steps, 12 tails (3 voltages not among the steps), the +40 mV prepulse once
    assert kinds.count(STEADY) == 1 and kinds.count(EXPM) == 13 + 3 + 1
    assert kinds.count(APPLY) == 13 + 12 + 1
    # one slot cannot hold the holding state and the prepulse's end: sweep by sweep
    assert schedule.schedule(protocol, 1) == schedule.sequential(protocol)
    assert [i.kind for i in schedule.sequential(protocol)].count(STEADY) == len(protocol.sweeps)
