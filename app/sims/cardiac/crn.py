"""Courtemanche, Ramirez & Nattel 1998 (CRN), hand-translated from the CellML file in
``shared/reference/cardiac/courtemanche_ramirez_nattel_1998.cellml`` (PMR exposure 0e03bbe0).

Every equation below is one CellML equation; the comment before each group names its CellML
component. Names are the CellML names. Currents are in pA (``Cm * g * ...`` as in the CellML
file), V in mV, time in ms, concentrations in mM. The CellML file's time-based stimulus is
replaced by the input ``i_st`` (pA/pF, the CellML sign: negative depolarises), applied by the
stimulus protocol.

Gating variables are written as ``<x>_inf`` and ``tau_<x>`` so that dx/dt = (x_inf - x)/tau_x,
i.e. the paper's Eq. 3 with a(V) = -1/tau and b(V) = x_inf/tau. The Ca-release gates u and v
depend on the flux signal Fn (and fCa on Ca_i) rather than on V alone; they are still linear
in their own variable and get the same Rush-Larsen treatment, with a and b evaluated at the
stage state.

Additions that are not in the CellML file (both off by default, ``ACh = 0``):

* I_KACh (Kneller et al. 2002, Circ Res 90:E73), pA:
  ``Cm * 10/(1 + 9.13652/ACh^0.477811) * (0.0517 + 0.4516/(1 + exp((V + 59.53)/17.18))) * (V - E_K)``
  with ACh in umol/L; it joins the K+ currents in dV/dt and d[K+]i/dt. The constants are the
  ones used by Kneller's canine model as carried into later atrial models; they were checked
  against secondary implementations, not against the paper's PDF (not in this workplace).
"""

from __future__ import annotations

# State order: the 6 non-gating variables (V and 5 concentrations), then the 15 gates.
NONGATING = ("V", "Na_i", "K_i", "Ca_i", "Ca_up", "Ca_rel")
GATES = ("m", "h", "j", "oa", "oi", "ua", "ui", "xr", "xs", "d", "f", "f_Ca", "u", "v", "w")
STATES = NONGATING + GATES
UNITS = {"V": "mV", "Na_i": "mM", "K_i": "mM", "Ca_i": "mM", "Ca_up": "mM", "Ca_rel": "mM"}

# Initial values: the CellML file (= Garcia-Molla's and Courtemanche's Table 4).
INITIAL = {
    "V": -81.18, "Na_i": 11.17, "K_i": 139.0, "Ca_i": 1.013e-4, "Ca_up": 1.488, "Ca_rel": 1.488,
    "m": 2.908e-3, "h": 0.9649, "j": 0.9775, "oa": 3.043e-2, "oi": 0.9992, "ua": 4.966e-3,
    "ui": 0.9986, "xr": 3.296e-5, "xs": 1.869e-2, "d": 1.367e-4, "f": 0.9996, "f_Ca": 0.7755,
    "u": 2.35e-112, "v": 1.0, "w": 0.9992,
}

# Constants (CellML initial values of non-state variables).
CONSTANTS = {
    # membrane
    "R": 8.3143, "T": 310.0, "F": 96.4867, "Cm": 100.0,
    # standard_ionic_concentrations
    "Na_o": 140.0, "Ca_o": 1.8, "K_o": 5.4,
    # conductances (nS/pF) and pump maxima
    "g_Na": 7.8, "g_K1": 0.09, "g_to": 0.1652, "K_Q10": 3.0, "g_Kr": 0.029411765,
    "g_Ks": 0.12941176, "g_Ca_L": 0.12375, "Km_Na_i": 10.0, "Km_K_o": 1.5,
    "i_NaK_max": 0.59933874, "g_B_Na": 0.0006744375, "g_B_Ca": 0.001131, "g_B_K": 0.0,
    "I_NaCa_max": 1600.0, "K_mNa": 87.5, "K_mCa": 1.38, "K_sat": 0.1, "gamma": 0.35,
    "i_CaP_max": 0.275, "K_rel": 30.0, "tau_tr": 180.0, "I_up_max": 0.005, "K_up": 0.00092,
    "Ca_up_max": 15.0, "CMDN_max": 0.05, "TRPN_max": 0.07, "CSQN_max": 10.0,
    "Km_CMDN": 0.00238, "Km_TRPN": 0.0005, "Km_CSQN": 0.8, "V_cell": 20100.0,
    "tau_u": 8.0, "tau_f_Ca": 2.0,
}

# Run-time parameters (one value for all cells), with defaults.
PARAMETERS = {"ACh": 0.0}

EQUATIONS = """
# intracellular_ion_concentrations: volumes
V_i = V_cell * 0.68
V_rel = 0.0048 * V_cell
V_up = 0.0552 * V_cell
RTF = (R * T) / F

# fast_sodium_current
E_Na = RTF * log(Na_o / Na_i)
i_Na = Cm * g_Na * pow(m, 3) * h * j * (V - E_Na)
# fast_sodium_current_m_gate
alpha_m = where(V == -47.13, 3.2, (0.32 * (V + 47.13)) / (1.0 - exp(-0.1 * (V + 47.13))))
beta_m = 0.08 * exp(-V / 11.0)
m_inf = alpha_m / (alpha_m + beta_m)
tau_m = 1.0 / (alpha_m + beta_m)
# fast_sodium_current_h_gate
alpha_h = where(V < -40.0, 0.135 * exp((V + 80.0) / -6.8), 0.0)
beta_h = where(V < -40.0, 3.56 * exp(0.079 * V) + 3.1e5 * exp(0.35 * V), 1.0 / (0.13 * (1.0 + exp((V + 10.66) / -11.1))))
h_inf = alpha_h / (alpha_h + beta_h)
tau_h = 1.0 / (alpha_h + beta_h)
# fast_sodium_current_j_gate
alpha_j = where(V < -40.0, ((-1.2714e5 * exp(0.2444 * V) - 3.474e-5 * exp(-0.04391 * V)) * (V + 37.78)) / (1.0 + exp(0.311 * (V + 79.23))), 0.0)
beta_j = where(V < -40.0, (0.1212 * exp(-0.01052 * V)) / (1.0 + exp(-0.1378 * (V + 40.14))), (0.3 * exp(-2.535e-7 * V)) / (1.0 + exp(-0.1 * (V + 32.0))))
j_inf = alpha_j / (alpha_j + beta_j)
tau_j = 1.0 / (alpha_j + beta_j)

# time_independent_potassium_current
E_K = RTF * log(K_o / K_i)
i_K1 = (Cm * g_K1 * (V - E_K)) / (1.0 + exp(0.07 * (V + 80.0)))

# transient_outward_K_current
i_to = Cm * g_to * pow(oa, 3) * oi * (V - E_K)
# transient_outward_K_current_oa_gate
alpha_oa = 0.65 / (exp((V + 10.0) / -8.5) + exp((V + 10.0 - 40.0) / -59.0))
beta_oa = 0.65 / (2.5 + exp((V + 10.0 + 72.0) / 17.0))
tau_oa = (1.0 / (alpha_oa + beta_oa)) / K_Q10
oa_inf = 1.0 / (1.0 + exp((V + 10.0 + 10.47) / -17.54))
# transient_outward_K_current_oi_gate
alpha_oi = 1.0 / (18.53 + exp((V + 10.0 + 103.7) / 10.95))
beta_oi = 1.0 / (35.56 + exp((V + 10.0 - 8.74) / -7.44))
tau_oi = (1.0 / (alpha_oi + beta_oi)) / K_Q10
oi_inf = 1.0 / (1.0 + exp((V + 10.0 + 33.1) / 5.3))

# ultrarapid_delayed_rectifier_K_current
g_Kur = 0.005 + 0.05 / (1.0 + exp((V - 15.0) / -13.0))
i_Kur = Cm * g_Kur * pow(ua, 3) * ui * (V - E_K)
# ultrarapid_delayed_rectifier_K_current_ua_gate (alpha, beta as for oa)
tau_ua = (1.0 / (alpha_oa + beta_oa)) / K_Q10
ua_inf = 1.0 / (1.0 + exp((V + 10.0 + 20.3) / -9.6))
# ultrarapid_delayed_rectifier_K_current_ui_gate
alpha_ui = 1.0 / (21.0 + exp((V + 10.0 - 195.0) / -28.0))
beta_ui = 1.0 / exp((V + 10.0 - 168.0) / -16.0)
tau_ui = (1.0 / (alpha_ui + beta_ui)) / K_Q10
ui_inf = 1.0 / (1.0 + exp((V + 10.0 - 109.45) / 27.48))

# rapid_delayed_rectifier_K_current
i_Kr = (Cm * g_Kr * xr * (V - E_K)) / (1.0 + exp((V + 15.0) / 22.4))
# rapid_delayed_rectifier_K_current_xr_gate
alpha_xr = where(fabs(V + 14.1) < 1e-10, 0.0015, (0.0003 * (V + 14.1)) / (1.0 - exp((V + 14.1) / -5.0)))
beta_xr = where(fabs(V - 3.3328) < 1e-10, 3.7836118e-4, (0.000073898 * (V - 3.3328)) / (exp((V - 3.3328) / 5.1237) - 1.0))
tau_xr = 1.0 / (alpha_xr + beta_xr)
xr_inf = 1.0 / (1.0 + exp((V + 14.1) / -6.5))

# slow_delayed_rectifier_K_current
i_Ks = Cm * g_Ks * pow(xs, 2) * (V - E_K)
# slow_delayed_rectifier_K_current_xs_gate
alpha_xs = where(fabs(V - 19.9) < 1e-10, 0.00068, (0.00004 * (V - 19.9)) / (1.0 - exp((V - 19.9) / -17.0)))
beta_xs = where(fabs(V - 19.9) < 1e-10, 0.000315, (0.000035 * (V - 19.9)) / (exp((V - 19.9) / 9.0) - 1.0))
tau_xs = 0.5 / (alpha_xs + beta_xs)
xs_inf = 1.0 / sqrt(1.0 + exp((V - 19.9) / -12.7))

# L_type_Ca_channel
i_Ca_L = Cm * g_Ca_L * d * f * f_Ca * (V - 65.0)
# L_type_Ca_channel_d_gate
d_inf = 1.0 / (1.0 + exp((V + 10.0) / -8.0))
tau_d = where(fabs(V + 10.0) < 1e-10, 4.579 / (1.0 + exp((V + 10.0) / -6.24)), (1.0 - exp((V + 10.0) / -6.24)) / (0.035 * (V + 10.0) * (1.0 + exp((V + 10.0) / -6.24))))
# L_type_Ca_channel_f_gate
f_inf = exp(-(V + 28.0) / 6.9) / (1.0 + exp(-(V + 28.0) / 6.9))
tau_f = 9.0 / (0.0197 * exp(-(0.0337 * 0.0337) * pow(V + 10.0, 2)) + 0.02)
# L_type_Ca_channel_f_Ca_gate
f_Ca_inf = 1.0 / (1.0 + Ca_i / 0.00035)

# sodium_potassium_pump
sigma = (1.0 / 7.0) * (exp(Na_o / 67.3) - 1.0)
f_NaK = 1.0 / (1.0 + 0.1245 * exp((-0.1 * F * V) / (R * T)) + 0.0365 * sigma * exp((-F * V) / (R * T)))
i_NaK = (((Cm * i_NaK_max * f_NaK) / (1.0 + pow(Km_Na_i / Na_i, 1.5))) * K_o) / (K_o + Km_K_o)

# background_currents
E_Ca = (RTF / 2.0) * log(Ca_o / Ca_i)
i_B_Na = Cm * g_B_Na * (V - E_Na)
i_B_Ca = Cm * g_B_Ca * (V - E_Ca)
i_B_K = Cm * g_B_K * (V - E_K)

# Na_Ca_exchanger_current
i_NaCa = (Cm * I_NaCa_max * (exp((gamma * F * V) / (R * T)) * pow(Na_i, 3) * Ca_o - exp(((gamma - 1.0) * F * V) / (R * T)) * pow(Na_o, 3) * Ca_i)) / ((pow(K_mNa, 3) + pow(Na_o, 3)) * (K_mCa + Ca_o) * (1.0 + K_sat * exp(((gamma - 1.0) * V * F) / (R * T))))

# sarcolemmal_calcium_pump_current
i_CaP = (Cm * i_CaP_max * Ca_i) / (0.0005 + Ca_i)

# Ca_release_current_from_JSR
i_rel = K_rel * pow(u, 2) * v * w * (Ca_rel - Ca_i)
Fn = 1e3 * (1e-15 * V_rel * i_rel - (1e-15 / (2.0 * F)) * (0.5 * i_Ca_L - 0.2 * i_NaCa))
# Ca_release_current_from_JSR_u_gate
u_inf = 1.0 / (1.0 + exp(-(Fn - 3.4175e-13) / 13.67e-16))
# Ca_release_current_from_JSR_v_gate
tau_v = 1.91 + 2.09 / (1.0 + exp(-(Fn - 3.4175e-13) / 13.67e-16))
v_inf = 1.0 - 1.0 / (1.0 + exp(-(Fn - 6.835e-14) / 13.67e-16))
# Ca_release_current_from_JSR_w_gate
tau_w = where(fabs(V - 7.9) < 1e-10, (6.0 * 0.2) / 1.3, (6.0 * (1.0 - exp(-(V - 7.9) / 5.0))) / ((1.0 + 0.3 * exp(-(V - 7.9) / 5.0)) * (V - 7.9)))
w_inf = 1.0 - 1.0 / (1.0 + exp(-(V - 40.0) / 17.0))

# transfer_current_from_NSR_to_JSR
i_tr = (Ca_up - Ca_rel) / tau_tr
# Ca_uptake_current_by_the_NSR, Ca_leak_current_by_the_NSR
i_up = I_up_max / (1.0 + K_up / Ca_i)
i_up_leak = (I_up_max * Ca_up) / Ca_up_max

# I_KACh (Kneller et al. 2002; not in the CellML file; zero when ACh = 0)
i_KACh = where(ACh > 0.0, Cm * (10.0 / (1.0 + 9.13652 / pow(ACh, 0.477811))) * (0.0517 + 0.4516 / (1.0 + exp((V + 59.53) / 17.18))) * (V - E_K), 0.0)

# membrane: dV/dt (without diffusion; the tissue solver adds it)
i_ion = i_Na + i_K1 + i_to + i_Kur + i_Kr + i_Ks + i_B_Na + i_B_Ca + i_NaK + i_CaP + i_NaCa + i_Ca_L + i_KACh
dV = -(i_ion + Cm * i_st) / Cm

# intracellular_ion_concentrations
dNa_i = (-3.0 * i_NaK - (3.0 * i_NaCa + i_B_Na + i_Na)) / (V_i * F)
dK_i = (2.0 * i_NaK - (i_K1 + i_to + i_Kur + i_Kr + i_Ks + i_B_K + i_KACh)) / (V_i * F)
B1 = (2.0 * i_NaCa - (i_CaP + i_Ca_L + i_B_Ca)) / (2.0 * V_i * F) + (V_up * (i_up_leak - i_up) + i_rel * V_rel) / V_i
B2 = 1.0 + (TRPN_max * Km_TRPN) / pow(Ca_i + Km_TRPN, 2) + (CMDN_max * Km_CMDN) / pow(Ca_i + Km_CMDN, 2)
dCa_i = B1 / B2
dCa_up = i_up - (i_up_leak + (i_tr * V_rel) / V_up)
dCa_rel = (i_tr - i_rel) / (1.0 + (CSQN_max * Km_CSQN) / pow(Ca_rel + Km_CSQN, 2))
"""

# Outputs: derivatives of the non-gating states, then (inf, tau) of each gate.
DERIVATIVES = tuple(f"d{n}" for n in NONGATING)
GATE_INF = tuple(f"{g}_inf" for g in GATES)
GATE_TAU = tuple(f"tau_{g}" for g in GATES)
