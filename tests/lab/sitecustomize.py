"""Lab only: activates the SGLang stand-in (sglang_standin/) in any Python started with this
directory on PYTHONPATH, as the lab's sglang.service is (sglang_service_environment). Python
imports ``sitecustomize`` at start-up from the first directory of sys.path that has one."""
import sglang_standin

sglang_standin.install()
