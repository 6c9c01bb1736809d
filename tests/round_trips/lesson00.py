from . import WrongAnswer

WRONG = WrongAnswer(
    "00_setup", "pick_device",
    "def pick_device():\n"
    "    if torch.cuda.is_available():\n"
    "        device = torch.device('cuda')\n"
    "    return device\n",
    "add the missing fallback")
