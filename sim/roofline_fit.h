/* Fitting the roofline to measured step times: the efficiencies and the fixed step cost that
 * bring its prices closest (in log ratio) to a measured cost table's over a fixed set of
 * steps (decodes of 1 to 256 sequences at three contexts, prefills of 128 to 8192 tokens,
 * prefill chunks after cached context, chunks riding with decodes), and the roofline's
 * error against the table on those steps. What `servesim roofline-fit` runs per GPU. */
#ifndef SERVESIM_SIM_ROOFLINE_FIT_H
#define SERVESIM_SIM_ROOFLINE_FIT_H

#include "core/model.h"
#include "sim/hardware.h"
#include "sim/sim.h"

/* One model's measured prices on the GPU being fitted. */
typedef struct fit_case {
    const model_shape *model;
    step_cost measured;
    bool fp8;            /* the table prices FP8 weights and an FP8 KV cache; the roofline too */
} fit_case;

/* The number of steps the fit prices per model. */
int roofline_fit_steps(void);
/* Fits HW's roofline to CASES (all bf16, or all FP8). 0 with the fit in OUT, -1 when the
 * search fails. */
int roofline_fit(const hw_spec *hw, const fit_case *cases, int ncases, hw_fit *out);
/* The fit's error on models it did not see: for each case, HW's roofline fitted to the other
 * cases prices this one's steps; the median and largest |error| over all of them go to
 * OUT's holdout fields. -1 with fewer than two cases or when a search fails. */
int roofline_fit_holdout(const hw_spec *hw, const fit_case *cases, int ncases, hw_fit *out);
/* |roofline / measured - 1| of step I (0 .. roofline_fit_steps() - 1) of CASE under FIT,
 * and the step's description in WHAT. */
double roofline_fit_error(const hw_spec *hw, const fit_case *c, const hw_fit *fit, int i, char *what, size_t len);

#endif
