//! Context managers (torch's `ctx_manager.py`): grad mode (`torch.no_grad`,
//! `enable_grad`, `set_grad_enabled`) as the trace switches it.

use crate::symbolic::VResult;
use pyo3::prelude::*;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::constant::const_bool;

impl<'a> InstructionTranslator<'a> {
    /// The grad mode tracing currently sees (the real global mode, switched as tracing goes).
    pub(crate) fn grad_enabled(&self, py: Python<'_>) -> VResult<bool> {
        Ok(self.og.handles.torch.bind(py).call_method0("is_grad_enabled")?.extract()?)
    }

    /// Switches grad mode at this point of the graph (a `torch._C._set_grad_enabled` node) and
    /// for the rest of tracing (fake tensors then compute `requires_grad` as eager would).
    pub(crate) fn set_grad_enabled(&mut self, py: Python<'_>, flag: bool) -> VResult<()> {
        let setter = self.og.handles.torch.bind(py).getattr("_C")?.getattr("_set_grad_enabled")?;
        self.og.record_effect(py, &setter, &[const_bool(py, flag)])?;
        setter.call1((flag,))?;
        Ok(())
    }

    // ----- values -----------------------------------------------------------------------

    /// Which grad-mode context class `c` is (`torch.no_grad`, `torch.enable_grad`,
    /// `torch.set_grad_enabled`), if any.
    pub(crate) fn grad_mode_class(&self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<Option<&'static str>> {
        let torch = self.og.handles.torch.bind(py);
        for name in ["no_grad", "enable_grad", "set_grad_enabled"] {
            if torch.getattr(name)?.is(c) {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }
}
